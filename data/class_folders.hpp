// Keras' directory layout for labelled files (text_dataset_from_directory, image_dataset_from_directory):
// SPLIT_FOLDER/<class>/.../<file>, one subfolder per class. Classes are the subfolders in sorted name
// order (label = position), or a given list (its order gives the labels; other subfolders are left out,
// e.g. aclImdb's train/unsup). Files are every regular file below a class folder, at any depth, whose
// extension is one of those asked for (case-insensitive). Files directly in SPLIT_FOLDER are not examples.
// The record order is fixed and mixed (like TFDS records, not grouped by class): files sorted by class,
// then path, then a fixed shuffle that depends only on the sorted list, so a slice such as train[:10%]
// holds every class and any process lists the same order.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::data {

struct ClassFolderFiles {
  std::string folder;                    // the split folder, as given
  std::vector<std::string> class_names;  // label k is class_names[k]
  std::vector<int32_t> labels;           // per file, in record order
  std::vector<std::string> files;        // per file: its path relative to `folder` ("pos/0_9.txt")
};

// `tag` starts every message ("[imdb]", "[text_folder]"). UsageError naming the path when the folder is
// missing or unreadable, when a given class has no folder, when there are no class folders, when a class
// name has a control character (it would break eval's and predict's lines), or when no
// file with such an extension is found (a class folder with none is an error too: a class with no
// example cannot be learned, and its label would silently shift nothing).
ClassFolderFiles list_class_folders(const std::string& folder, const std::vector<std::string_view>& extensions,
                                    const std::vector<std::string>& classes, const std::string& tag);

// The classes list_class_folders takes when none are given: the subfolders of `folder`, sorted by name (a
// directory listing only, no file is read: `dtrain plan` counts the classes this way). UsageError naming the
// folder when it is missing, unreadable or has no subfolder.
std::vector<std::string> class_folder_names(const std::string& folder, const std::string& tag);

// The fixed record-order shuffle of list_class_folders (exposed for the tests that rebuild it).
inline constexpr uint64_t kRecordOrderSeed = 0x1a3d'b0c0'ffee'2011ull;

}  // namespace dtrain::data
