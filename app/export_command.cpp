// `dtrain export CKPT [--onnx FILE] [--safetensors FILE]`: a checkpoint's trained model in standard formats,
// from the checkpoint alone (a checkpoint dir, whose latest is exported, a ckpt-N folder or a pointer file;
// written on any mesh by any number of processes):
//   --safetensors FILE  every variable (moving statistics included, no optimizer slots) by its path
//                       ("dense1/kernel"), float32, with the step, run_id and class names as metadata
//                       (engine/safetensors_file.hpp);
//   --onnx FILE         the network as an ONNX model computing predict's probabilities (engine/onnx_export.hpp),
//                       the class names, step and run_id as metadata_props; for a text model also the fitted
//                       vectorizer beside it, FILE's stem + ".vectorizer.json" (mode, sequence settings,
//                       vocabulary, idf), whose rows are the model's input.
// The model is the one predict rebuilds (engine/checkpoint_model.hpp); the values are read whole from the
// checkpoint's shards whatever their layout (checkpoint::BlockReader), bit for bit.
#include <filesystem>

#include "app/commands.hpp"
#include "core/checkpoint/files.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/error.hpp"
#include "core/train/metrics_log.hpp"
#include "engine/checkpoint_hooks.hpp"
#include "engine/checkpoint_model.hpp"
#include "engine/onnx_export.hpp"
#include "engine/safetensors_file.hpp"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using train::json_string;

const std::string kVariablesPrefix = "variables/";

// An output file's folder must exist: a typo in it is a usage error before anything is read.
void check_output(const std::string& option, const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  std::error_code error;
  DTRAIN_CHECK_USAGE(!path.empty() && fs::path(path).has_filename(), "export: {} needs a file name, not '{}'", option, path);
  DTRAIN_CHECK_USAGE(parent.empty() || fs::is_directory(parent, error), "export: {} {}: folder {} does not exist", option,
                     path, parent.string());
  DTRAIN_CHECK_USAGE(!fs::is_directory(path, error), "export: {} {} is a folder, not a file", option, path);
}

// The checkpoint's variables, whole, in its order.
std::vector<NamedValues> read_variables(const checkpoint::CheckpointIndex& index) {
  checkpoint::BlockReader reader(index);
  std::vector<NamedValues> variables;
  for (const checkpoint::TensorRecord& record : index.tensors) {
    if (record.name.rfind(kVariablesPrefix, 0) != 0) continue;
    NamedValues v{record.name.substr(kVariablesPrefix.size()), record.global_shape,
                  std::vector<float>(size_t(num_elements(record.global_shape)))};
    reader.read(record, Shape(record.global_shape.size(), 0), record.global_shape, v.values.data());
    variables.push_back(std::move(v));
  }
  return variables;
}

std::string json_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += json_string(items[i]);
  }
  return out + "]";
}

// The fitted vectorizer beside the ONNX model: what turns texts into its input rows.
std::string vectorizer_json(const Config& config, const checkpoint::CheckpointMeta& meta) {
  const VectorizerConfig& v = config.data.vectorizer;
  std::string idf = "[";
  for (size_t i = 0; i < meta.idf.size(); ++i) idf += fmt::format("{}{}", i ? "," : "", meta.idf[i]);  // shortest exact form
  idf += "]";
  std::string text = fmt::format("{{\"mode\":{},\"max_tokens\":{}", json_string(v.mode), v.max_tokens);
  if (v.mode == "int")
    text += fmt::format(",\"output_sequence_length\":{},\"truncating\":{},\"padding\":{}", v.output_sequence_length,
                        json_string(v.truncating), json_string(v.padding));
  return text + fmt::format(",\"vocabulary\":{},\"idf\":{}}}\n", json_list(meta.vocabulary), idf);
}

fs::path sidecar_path(const std::string& onnx_path) {
  fs::path path(onnx_path);
  return path.replace_extension(".vectorizer.json");
}

}  // namespace

int run_export(const CommandOptions& options) {
  DTRAIN_CHECK_USAGE(!options.onnx_file.empty() || !options.safetensors_file.empty(),
                     "export: give --onnx FILE and/or --safetensors FILE (what to write)");
  if (!options.onnx_file.empty()) check_output("--onnx", options.onnx_file);
  if (!options.safetensors_file.empty()) check_output("--safetensors", options.safetensors_file);
  std::error_code error;
  DTRAIN_CHECK_USAGE(fs::exists(options.checkpoint, error), "export: {} does not exist", options.checkpoint);

  const CheckpointModel loaded = open_checkpoint_model(options.checkpoint);
  const checkpoint::CheckpointIndex& index = loaded.index();
  const Config& config = loaded.config;
  const std::vector<std::string> class_names = saved_class_names(index, config);
  const StringPairs metadata{{"producer", "dtrain"},
                             {"step", std::to_string(index.meta.step)},
                             {"run_id", index.meta.run_id},
                             {"class_names", json_list(class_names)},
                             {"dataset", to_string(config.data.dataset)}};
  const std::vector<NamedValues> variables = read_variables(index);

  // The ONNX model is made (or refused) before anything is written.
  std::string onnx_bytes;
  if (!options.onnx_file.empty()) {
    const onnx::ModelProto model = onnx_model(OnnxExportInput{config, *loaded.built.model, variables, metadata});
    DTRAIN_CHECK(model.SerializeToString(&onnx_bytes), "[export] the ONNX model of {} did not serialize", index.folder);
  }
  if (process_index() != 0) return 0;  // under mpirun, process 0 writes
  if (!options.safetensors_file.empty()) {
    checkpoint::write_file_atomically(options.safetensors_file, safetensors_bytes(variables, metadata));
    fmt::print("export: {} variables of checkpoint {} (step {}) written to {}\n", variables.size(), index.folder,
               index.meta.step, options.safetensors_file);
  }
  if (!options.onnx_file.empty()) {
    checkpoint::write_file_atomically(options.onnx_file, onnx_bytes);
    fmt::print("export: the model of checkpoint {} (step {}) written to {} (ONNX opset {}; input \"input\" {}, "
               "output \"probabilities\" of {} classes)\n",
               index.folder, index.meta.step, options.onnx_file, kOnnxOpset,
               onnx_input_is_ids(config) ? "int64 token ids" : "float32", class_names.size());
    if (is_text(config.data.dataset)) {
      DTRAIN_CHECK(!index.meta.vocabulary.empty(), "[export] checkpoint {} of a text model holds no vectorizer",
                   index.folder);
      const std::string sidecar = sidecar_path(options.onnx_file).string();
      checkpoint::write_file_atomically(sidecar, vectorizer_json(config, index.meta));
      fmt::print("export: its text vectorizer ({} tokens, mode {}) written to {}\n", index.meta.vocabulary.size(),
                 config.data.vectorizer.mode, sidecar);
    }
  }
  return 0;
}

}  // namespace dtrain
