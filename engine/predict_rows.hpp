// Rows of numbers for `dtrain predict --npy FILE | --csv FILE`: batch input for any model that does not read
// texts, read by the data sources' own readers (data/array_file.hpp, data/csv.hpp) and checked against the
// model's input. The values become what the model's data source would have made of them: an arrays model's
// rows (of either file) divided by its data.arrays.divide_by, an image model's uint8 pixels (a uint8 .npy)
// by 255 (as its IDX and PNG readers do); other values as they are.
#pragma once
#include <string>

#include "app/config.hpp"
#include "core/tensor.hpp"

namespace dtrain {

// A .npy array [N, ...] whose rows hold the model's input (its elements; their shape may differ, as
// data.arrays.example_shape reshapes), of float32, float64, uint8 or any integer type. `checkpoint` is named
// in errors. UsageError naming the file: an unreadable or malformed file, a wrong row shape, no rows, or a
// text model.
Tensor read_npy_rows(const std::string& path, const Config& config, const std::string& checkpoint);

// A CSV file (a header row naming the columns, then a row per input), parsed as dataset csv parses: a csv
// model's feature columns data.csv.features (else every column but data.csv.label), its label column
// optional; another model's every column. UsageError naming the file (and the line and column where one is
// at fault): a column count other than the model's input, a field that is no number, a text model.
Tensor read_csv_rows(const std::string& path, const Config& config, const std::string& checkpoint);

}  // namespace dtrain
