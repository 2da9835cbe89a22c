// CSV files of examples (dataset: csv): a header row naming the columns, then one example a row; the label
// column holds class ids (whole numbers >= 0), the feature columns numbers. Fields follow RFC 4180 (quoted
// with ", a quote inside doubled, commas and line breaks allowed inside quotes); CRLF or LF line ends, a
// UTF-8 byte order mark skipped, blank lines skipped. Read whole into memory: CSVs are small. Every defect
// is a UsageError "[csv] FILE:LINE:COL: what" (1-based; COL counts bytes of the line).
#pragma once
#include <string>
#include <vector>

#include "data/dataset.hpp"

namespace dtrain::data {

// The header row's column names.
std::vector<std::string> read_csv_header(const std::string& path);

// The examples of `path`: labels from column `label`, features from the columns `features` in that order
// (empty: every column but the label, in file order), as a dense Dataset of shape [features]. `lines`, when
// given, receives the line each example starts on.
Dataset read_csv(const std::string& path, const std::string& label, const std::vector<std::string>& features,
                 std::vector<int64_t>* lines = nullptr);

// The feature rows alone (what predict reads), row-major: the columns read_csv takes as features, from a file
// that may leave the label column out (one that is there is not read). An empty `label` names no label
// column. `columns` receives the feature columns' names, `lines` the line each row starts on.
std::vector<float> read_csv_features(const std::string& path, const std::string& label,
                                     const std::vector<std::string>& features, std::vector<std::string>& columns,
                                     std::vector<int64_t>& lines);

}  // namespace dtrain::data
