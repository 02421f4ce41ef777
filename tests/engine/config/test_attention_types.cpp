// engine.config.attention_types: a feature-map spec is read and written the same whatever the
// C library's LC_NUMERIC says (the workbench's Qt sets it from the user's locale):
//   - under a comma-decimal locale, "exp_t=0.5" parses to t = 0.5 and is written back as
//     "exp_t=0.5"; "exp_t=0,5" is refused as the CLI refuses it; a layer spec with a window too.
//     the locale generated when none is installed (tests/support/comma_locale.h);
//   - the spec is written as printf's %g writes it in the C locale (6 significant digits).
#include <locale.h>

#include <cstdio>
#include <string>

#include "engine/config/attention_types.h"
#include "tests/support/comma_locale.h"
#include "tests/support/hh_test.h"

namespace test_attention_types {

namespace {

namespace a = hh::attn;


// Sets LC_NUMERIC for the scope (a failed check returns early: the locale is restored anyway).
class NumericLocale {
 public:
  explicit NumericLocale(const std::string& name) : saved_(setlocale(LC_NUMERIC, nullptr)) {
    setlocale(LC_NUMERIC, name.c_str());
  }
  ~NumericLocale() { setlocale(LC_NUMERIC, saved_.c_str()); }

 private:
  std::string saved_;
};

a::FeatureMapConfig expT(double t) {
  a::FeatureMapConfig config;
  config.kind = a::FeatureMapKind::ExpT;
  config.expT = t;
  return config;
}

}  // namespace

class TestAttentionTypes : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void expTIgnoresTheNumericLocale() {
    const std::string name = hh::test::commaDecimalLocale();
    if (name.empty())
      QSKIP("no comma-decimal locale installed, and none could be generated (the locales package)");
    NumericLocale comma(name);
    QCOMPARE(std::string(localeconv()->decimal_point), std::string(","));  // the C library reads commas now
    const auto half = a::parseFeatureMapSpec("exp_t=0.5");
    QVERIFY(half.kind == a::FeatureMapKind::ExpT);
    QCOMPARE(half.expT, 0.5);
    QCOMPARE(a::featureMapSpec(half), std::string("exp_t=0.5"));
    QCOMPARE(a::featureMapSpec(expT(2.5e-7)), std::string("exp_t=2.5e-07"));
    HH_VERIFY_THROWS_WITH(a::parseFeatureMapSpec("exp_t=0,5"), "t must be a positive number");
    const auto layer = a::parseLayerAttention("exp_t=1.5_window(8)");
    QVERIFY(layer.has_value());
    QCOMPARE(layer->featureMap.expT, 1.5);
    QCOMPARE(a::describe(*layer), std::string("exp_t=1.5_window(8)"));
  }

  void specIsWrittenLikePrintfG() {
    NumericLocale c("C");
    for (const double t : {0.5, 2.0, 1.0 / 3.0, 1e-7, 123456789.0, 1e300, 0.000123456789}) {
      char expected[64];
      std::snprintf(expected, sizeof expected, "exp_t=%g", t);
      QCOMPARE(a::featureMapSpec(expT(t)), std::string(expected));
    }
    QCOMPARE(a::featureMapSpec(expT(1.0)), std::string("exp_t"));  // t = 1 is the map's default
  }
};

HH_TEST_SUITE(TestAttentionTypes, "engine.config.attention_types", &TestAttentionTypes::expTIgnoresTheNumericLocale,
              &TestAttentionTypes::specIsWrittenLikePrintfG)

}  // namespace test_attention_types

#if HH_HAVE_QTEST
#include "test_attention_types.moc"
#endif
