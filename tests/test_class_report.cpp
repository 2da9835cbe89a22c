// eval --report's arithmetic (core/train/class_report.hpp) on an asymmetric confusion matrix worked out by hand,
// a class never seen nor rightly predicted included (scikit-learn's zero_division 0), as text and JSON.
#include <doctest/doctest.h>

#include "core/error.hpp"
#include "core/train/class_report.hpp"

using namespace dtrain;

TEST_CASE("class report: precision, recall, F1 and their averages from a confusion matrix") {
  // Rows: the true class; columns: the predicted one. Class c is never the truth, once predicted.
  const std::vector<int64_t> confusion{5, 1, 0,  //
                                       2, 3, 1,  //
                                       0, 0, 0};
  const train::ClassReport report = train::ClassReport::from_confusion(confusion, 3);
  REQUIRE(report.classes.size() == 3);
  const double p0 = 5.0 / 7.0, r0 = 5.0 / 6.0, f0 = 2 * p0 * r0 / (p0 + r0);
  CHECK(report.classes[0].precision == doctest::Approx(p0).epsilon(1e-12));
  CHECK(report.classes[0].recall == doctest::Approx(r0).epsilon(1e-12));
  CHECK(report.classes[0].f1 == doctest::Approx(f0).epsilon(1e-12));
  CHECK(report.classes[0].support == 6);
  CHECK(report.classes[1].precision == doctest::Approx(0.75).epsilon(1e-12));  // 3 of the 4 predicted b
  CHECK(report.classes[1].recall == doctest::Approx(0.5).epsilon(1e-12));      // 3 of the 6 b
  CHECK(report.classes[1].f1 == doctest::Approx(0.6).epsilon(1e-12));
  CHECK(report.classes[2].precision == 0.0);
  CHECK(report.classes[2].recall == 0.0);
  CHECK(report.classes[2].f1 == 0.0);
  CHECK(report.classes[2].support == 0);
  CHECK(report.macro.precision == doctest::Approx((p0 + 0.75) / 3).epsilon(1e-12));
  CHECK(report.macro.recall == doctest::Approx((r0 + 0.5) / 3).epsilon(1e-12));
  CHECK(report.macro.f1 == doctest::Approx((f0 + 0.6) / 3).epsilon(1e-12));
  CHECK(report.weighted.precision == doctest::Approx((p0 + 0.75) / 2).epsilon(1e-12));  // supports 6, 6, 0
  CHECK(report.weighted.support == 12);

  const std::vector<std::string> names{"a", "b", "c"};
  const std::string text = report.text(names);
  CHECK(text.find("a     0.7143     0.8333     0.7692          6") != std::string::npos);
  CHECK(text.find("b     0.7500     0.5000     0.6000          6") != std::string::npos);
  CHECK(text.find("macro avg") != std::string::npos);
  CHECK(text.find("  a  5  1  0\n") != std::string::npos);  // row a of the matrix
  CHECK(text.find("  b  2  3  1\n") != std::string::npos);
  const std::string json = report.json(names);
  CHECK(json.find("\"confusion\": [[5, 1, 0], [2, 3, 1], [0, 0, 0]]") != std::string::npos);
  CHECK(json.find("{\"name\": \"b\", \"precision\": 0.75, \"recall\": 0.5, \"f1\": 0.6, \"support\": 6}") !=
        std::string::npos);
  CHECK_THROWS_AS(train::ClassReport::from_confusion({1, 2, 3}, 2), Error);
}
