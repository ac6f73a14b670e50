//===- Float8Test.cpp - float8 rounding against the NumPy reference -------===//
//
// zrt::F8E4M3 and zrt::F8E5M2 (support/NarrowFloat.h, issue 54's FP8
// emulation) against Inputs/fp8_reference.py's exact rational rounding:
// every value, every tie between neighbours and the float32 values one ulp
// either side, the subnormals, saturation beyond the largest value and of
// infinities; and every code's value.
//
//===----------------------------------------------------------------------===//
#include "support/NarrowFloat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

struct RoundingCase {
  uint32_t input;
  uint8_t e4m3, e5m2;
};
const RoundingCase kCases[] = {
#include "Inputs/fp8_cases.inc"
};

struct DecodeCase {
  uint8_t code;
  uint32_t e4m3, e5m2;
};
const DecodeCase kDecoded[] = {
#include "Inputs/fp8_cases-decode.inc"
};

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Float8Test, RoundsToNearestEvenAndSaturatesAsTheReference) {
  ASSERT_GT(sizeof(kCases) / sizeof(kCases[0]), 1000u);
  int wrong = 0;
  for (const RoundingCase &c : kCases) {
    float x = fromBits(c.input);
    uint8_t a = zrt::F8E4M3(x).bits, b = zrt::F8E5M2(x).bits;
    if (a != c.e4m3 || b != c.e5m2) {
      if (++wrong <= 10)
        ADD_FAILURE() << std::hexfloat << x << " (0x" << std::hex << c.input << "): e4m3 0x"
                      << (int)a << " (reference 0x" << (int)c.e4m3 << "), e5m2 0x" << (int)b
                      << " (reference 0x" << (int)c.e5m2 << ")";
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(Float8Test, DecodesEveryCodeAsTheReference) {
  for (const DecodeCase &c : kDecoded) {
    zrt::F8E4M3 a;
    zrt::F8E5M2 b;
    a.bits = b.bits = c.code;
    float ea = fromBits(c.e4m3), eb = fromBits(c.e5m2);
    if (std::isnan(ea))
      EXPECT_TRUE(std::isnan((float)a)) << "e4m3 code " << (int)c.code;
    else
      EXPECT_EQ((float)a, ea) << "e4m3 code " << (int)c.code;
    if (std::isnan(eb))
      EXPECT_TRUE(std::isnan((float)b)) << "e5m2 code " << (int)c.code;
    else
      EXPECT_EQ((float)b, eb) << "e5m2 code " << (int)c.code;
  }
}

TEST(Float8Test, NaNStaysNaN) {
  float nan = std::nanf("");
  EXPECT_EQ(zrt::F8E4M3(nan).bits & 0x7f, 0x7f);
  EXPECT_TRUE(std::isnan((float)zrt::F8E4M3(nan)));
  EXPECT_TRUE(std::isnan((float)zrt::F8E5M2(nan)));
  EXPECT_TRUE(std::isnan((float)zrt::F8E5M2(-nan)));
}

} // namespace
