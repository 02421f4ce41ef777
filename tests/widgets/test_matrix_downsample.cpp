// Block reduction for display: sizes, max / mean / largest-magnitude blocks, masked (NaN) cells,
// uneven last blocks, and the finite range helper.
#include <cmath>
#include <limits>
#include <vector>

#include "tests/support/hh_test.h"
#include "widgets/matrix_downsample.h"

namespace test_matrix_downsample {

using namespace hh::widgets;

class TestMatrixDownsample : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void smallMatrixIsCopied() {
    const std::vector<float> v = {1, 2, 3, 4, 5, 6};
    const DownsampledMatrix d = downsampleMatrix(2, 3, v.data(), 512, 512, BlockReduce::Max);
    QCOMPARE(d.rows, 2);
    QCOMPARE(d.cols, 3);
    QCOMPARE(d.blockRows, 1);
    QCOMPARE(d.values, v);
  }

  void blockMaxMeanAbsMax() {
    // 4 x 4 -> 2 x 2 blocks.
    const std::vector<float> v = {1, 2, -9, 0,   //
                                  3, 4, 1, 1,    //
                                  0, 0, 5, 6,    //
                                  0, 8, 7, -8};
    const DownsampledMatrix mx = downsampleMatrix(4, 4, v.data(), 2, 2, BlockReduce::Max);
    QCOMPARE(mx.rows, 2);
    QCOMPARE(mx.cols, 2);
    QCOMPARE(mx.values, (std::vector<float>{4, 1, 8, 7}));
    const DownsampledMatrix mean = downsampleMatrix(4, 4, v.data(), 2, 2, BlockReduce::Mean);
    QCOMPARE(mean.values, (std::vector<float>{2.5f, -1.75f, 2.0f, 2.5f}));
    const DownsampledMatrix am = downsampleMatrix(4, 4, v.data(), 2, 2, BlockReduce::AbsMax);
    QCOMPARE(am.values, (std::vector<float>{4, -9, 8, -8}));
  }

  void maskedCellsAreIgnoredAndAllMaskedStaysNan() {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    // Causal 4 x 4 (upper triangle masked) -> 2 x 2.
    const std::vector<float> v = {1, nan, nan, nan,  //
                                  2, 3, nan, nan,    //
                                  4, 5, 6, nan,      //
                                  7, 8, 9, 10};
    const DownsampledMatrix d = downsampleMatrix(4, 4, v.data(), 2, 2, BlockReduce::Mean);
    QCOMPARE(d.values[0], 2.0f);
    QVERIFY(std::isnan(d.values[1]));
    QCOMPARE(d.values[2], 6.0f);
    QCOMPARE(d.values[3], (6.0f + 9.0f + 10.0f) / 3.0f);
  }

  void unevenLastBlock() {
    // 5 columns at most 2 per side -> block 3, display 2 columns (3 + 2 source columns).
    const std::vector<float> v = {1, 2, 3, 4, 5};
    const DownsampledMatrix d = downsampleMatrix(1, 5, v.data(), 1, 2, BlockReduce::Max);
    QCOMPARE(d.cols, 2);
    QCOMPARE(d.blockCols, 3);
    QCOMPARE(d.values, (std::vector<float>{3, 5}));
  }

  void largeMatrixFitsTheLimit() {
    const int n = 1500;
    std::vector<float> v(size_t(n) * n, 0.25f);
    v[size_t(1234) * n + 777] = 9.0f;
    const DownsampledMatrix d = downsampleMatrix(n, n, v.data(), 512, 512, BlockReduce::Max);
    QVERIFY(d.rows <= 512 && d.cols <= 512);
    QCOMPARE(d.blockRows, 3);
    QCOMPARE(d.values[size_t(1234 / 3) * size_t(d.cols) + size_t(777 / 3)], 9.0f);  // the peak survives
  }

  void finiteRangeSkipsNanAndInf() {
    const std::vector<float> v = {std::numeric_limits<float>::quiet_NaN(), -2.0f, 5.0f,
                                  std::numeric_limits<float>::infinity()};
    const FiniteRange r = finiteRange(v.data(), v.size());
    QVERIFY(r.valid);
    QCOMPARE(r.lo, -2.0);
    QCOMPARE(r.hi, 5.0);
    const std::vector<float> none = {std::numeric_limits<float>::quiet_NaN()};
    QVERIFY(!finiteRange(none.data(), none.size()).valid);
  }
};

HH_TEST_SUITE(TestMatrixDownsample, "widgets.downsample",
              &TestMatrixDownsample::smallMatrixIsCopied, &TestMatrixDownsample::blockMaxMeanAbsMax,
              &TestMatrixDownsample::maskedCellsAreIgnoredAndAllMaskedStaysNan,
              &TestMatrixDownsample::unevenLastBlock, &TestMatrixDownsample::largeMatrixFitsTheLimit,
              &TestMatrixDownsample::finiteRangeSkipsNanAndInf)

}  // namespace test_matrix_downsample

#if HH_HAVE_QTEST
#include "test_matrix_downsample.moc"
#endif
