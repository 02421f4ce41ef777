// engine.models.tensor_file: readTensorInto, the copy a model's weights are loaded with
// (WeightSource::load), against readTensor, the whole-tensor copy it replaces:
//   - equal values, exactly: F32 into a contiguous tensor in 4 MB runs of rows and a tail,
//     into a transposed view (GPT-2's Conv1D weights), BF16 and F16 into float, and an
//     unaligned data buffer (the fallback path);
//   - NaN and infinite values counted, and WeightSource::load refusing them with the count;
//   - memory: reading a 128 MB tensor into an allocated one raises the process's peak by less
//     than 40 MB (a few runs of rows, not a second copy of the tensor and not all its file pages;
//     readTensor + copy_ makes a whole 128 MB copy on its own). Not checked under a sanitizer, whose allocator
//     keeps freed blocks.
#include <torch/torch.h>

#include <cstring>
#include <fstream>
#include <limits>

#include "engine/core/process_memory.h"
#include "engine/models/tensor_file.h"
#include "engine/models/weight_source.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_tensor_file {

namespace {

namespace m = hh::models;

bool same(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && torch::equal(a, b);
}

std::string u64le(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

class TestTensorFile : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void readIntoEqualsReadTensor() {
    hh::test::TempDir dir("tensor_file");
    const auto path = dir.file("w.safetensors");
    torch::manual_seed(0);
    const auto big = torch::randn({4500, 2000});  // 36 MB: 4 MB runs of rows and a shorter last one
    const auto conv = torch::randn({24, 72});
    const auto half = torch::randn({37, 13});
    m::writeTensorFile(path, {{"big", big}, {"conv", conv}, {"bf16", half.to(torch::kBFloat16)}, {"f16", half.to(torch::kHalf)}});
    const auto file = hh::io::SafetensorsFile::open(path);
    auto into = torch::empty({4500, 2000});
    QCOMPARE(m::readTensorInto(file, "big", into), int64_t(0));
    QVERIFY(same(into, big));
    auto linear = torch::zeros({72, 24});  // a Linear's [out, in], the file's Conv1D [in, out]
    QCOMPARE(m::readTensorInto(file, "conv", linear.t()), int64_t(0));
    QVERIFY(same(linear, conv.t().contiguous()));
    for (const char* name : {"bf16", "f16"}) {
      auto f = torch::empty({37, 13});
      m::readTensorInto(file, name, f);
      QVERIFY2(same(f, m::readTensor(file, name)), name);
    }
  }

  void unalignedDataIsReadToo() {
    hh::test::TempDir dir("tensor_file_unaligned");
    const auto path = dir.file("u.safetensors");
    std::string header = R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
    while ((8 + header.size()) % 4 != 1) header += ' ';  // the data start is not float-aligned
    const float a[6] = {1.5f, -2.25f, 3.0f, 4.0f, -5.5f, 6.0f};
    std::string data(24, '\0');
    std::memcpy(&data[0], a, 24);
    std::ofstream(path, std::ios::binary) << u64le(header.size()) << header << data;
    const auto file = hh::io::SafetensorsFile::open(path);
    QVERIFY(reinterpret_cast<uintptr_t>(file.bytes("a")) % 4 != 0);
    auto into = torch::empty({2, 3});
    QCOMPARE(m::readTensorInto(file, "a", into), int64_t(0));
    QVERIFY(same(into, torch::tensor({1.5f, -2.25f, 3.0f, 4.0f, -5.5f, 6.0f}).view({2, 3})));
  }

  void nonFiniteValuesAreCountedAndRefused() {
    hh::test::TempDir dir("tensor_file_nan");
    auto w = torch::ones({10, 4});
    w[1][2] = std::numeric_limits<float>::quiet_NaN();
    w[7][0] = std::numeric_limits<float>::infinity();
    w[9][3] = -std::numeric_limits<float>::infinity();
    m::writeTensorFile(dir.file("model.safetensors"), {{"w", w}});
    const auto file = hh::io::SafetensorsFile::open(dir.file("model.safetensors"));
    auto into = torch::empty({10, 4});
    QCOMPARE(m::readTensorInto(file, "w", into), int64_t(3));
    auto source = m::WeightSource::open(dir.path());
    try {
      source.load(torch::empty({10, 4}), "w", {10, 4});
      QFAIL("a tensor with NaN was loaded");
    } catch (const hh::io::FormatError& e) {
      QVERIFY2(std::string(e.what()).find("holds 3 of 40 values that are NaN or infinite") != std::string::npos, e.what());
    }
  }

  void readingIntoATensorHoldsNoSecondCopy() {
#if HH_UNDER_SANITIZER
    QSKIP("the sanitizer's allocator keeps freed blocks: resident memory says nothing here");
#else
    hh::test::TempDir dir("tensor_file_memory");
    const auto path = dir.file("big.safetensors");
    m::writeTensorFile(path, {{"w", torch::full({8192, 4096}, 0.5f)}});  // 128 MB
    const auto file = hh::io::SafetensorsFile::open(path);
    auto into = torch::zeros({8192, 4096});  // its pages resident before the measure
    hh::releaseFreeMemory();
    hh::resetPeakResident();
    const int64_t before = hh::residentBytes();
    QCOMPARE(m::readTensorInto(file, "w", into), int64_t(0));
    const double above = double(hh::peakResidentBytes() - before) / (1 << 20);
    qInfo("reading 128 MB into an allocated tensor: peak %.1f MB above before", above);
    QVERIFY2(above < 40, std::to_string(above).c_str());
    QCOMPARE(into[8191][4095].item<float>(), 0.5f);
#endif
  }
};

HH_TEST_SUITE(TestTensorFile, "engine.models.tensor_file", &TestTensorFile::readIntoEqualsReadTensor,
              &TestTensorFile::unalignedDataIsReadToo, &TestTensorFile::nonFiniteValuesAreCountedAndRefused,
              &TestTensorFile::readingIntoATensorHoldsNoSecondCopy)

}  // namespace test_tensor_file

#if HH_HAVE_QTEST
#include "test_tensor_file.moc"
#endif
