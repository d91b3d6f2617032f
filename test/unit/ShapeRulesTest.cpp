//===- ShapeRulesTest.cpp - The shape rules shared by Sema and verifiers --===//

#include "lang/ShapeRules.h"

#include <gtest/gtest.h>

using namespace mnemo::shape;

TEST(ShapeRules, Broadcast) {
  EXPECT_EQ(broadcast({4, 3}, {3}).shape, (Shape{4, 3}));
  EXPECT_EQ(broadcast({4, 1}, {1, 5}).shape, (Shape{4, 5}));
  EXPECT_EQ(broadcast({}, {2, 2}).shape, (Shape{2, 2}));
  ShapeResult bad = broadcast({4, 3}, {5});
  EXPECT_EQ(bad.error, "dimensions 3 and 5 (axis -1) do not broadcast");
}

TEST(ShapeRules, BroadcastTo) {
  EXPECT_TRUE(broadcastTo({1, 5}, {4, 5}).ok());
  EXPECT_FALSE(broadcastTo({2, 5}, {4, 5}).ok());
  EXPECT_FALSE(broadcastTo({3, 4, 5}, {4, 5}).ok());
}

TEST(ShapeRules, Matmul) {
  EXPECT_EQ(matmul({128, 784}, {784, 512}, false, false).shape,
            (Shape{128, 512}));
  EXPECT_EQ(matmul({16, 64, 128}, {256, 128}, false, true).shape,
            (Shape{16, 64, 256}));
  EXPECT_EQ(matmul({784, 128}, {784, 512}, true, false).shape,
            (Shape{128, 512}));
  EXPECT_EQ(matmul({128, 784}, {512, 10}, false, false).error,
            "inner dimensions 784 and 512 differ");
  EXPECT_FALSE(matmul({128}, {128, 2}, false, false).ok());
}

TEST(ShapeRules, BatchMatmul) {
  EXPECT_EQ(batchMatmul({2, 4, 8, 16}, {2, 4, 8, 16}, false, true).shape,
            (Shape{2, 4, 8, 8}));
  EXPECT_EQ(batchMatmul({2, 4, 8, 16}, {3, 4, 16, 8}, false, false).error,
            "batch dimensions 2 and 3 (axis 0) differ");
}

TEST(ShapeRules, Reduce) {
  EXPECT_EQ(reduce({2, 3, 4}, {1}, false).shape, (Shape{2, 4}));
  EXPECT_EQ(reduce({2, 3, 4}, {-1}, true).shape, (Shape{2, 3, 1}));
  EXPECT_EQ(reduce({2, 3, 4}, {0, 1, 2}, false).shape, (Shape{}));
  EXPECT_FALSE(reduce({2, 3}, {2}, false).ok());
  EXPECT_FALSE(reduce({2, 3}, {1, -1}, false).ok());
}

TEST(ShapeRules, Reshape) {
  EXPECT_EQ(reshape({128, 28, 28}, {128, -1}).shape, (Shape{128, 784}));
  EXPECT_EQ(reshape({6}, {2, 3}).shape, (Shape{2, 3}));
  EXPECT_EQ(reshape({6}, {4, -1}).error,
            "6 elements cannot be split into [4,-1]");
  EXPECT_FALSE(reshape({6}, {-1, -1}).ok());
  EXPECT_FALSE(reshape({6}, {7}).ok());
}

TEST(ShapeRules, TransposeSliceConcat) {
  EXPECT_EQ(transpose({2, 3, 4}, {2, 0, 1}).shape, (Shape{4, 2, 3}));
  EXPECT_FALSE(transpose({2, 3}, {0, 0}).ok());
  EXPECT_EQ(slice({10, 8}, 0, 2, 8, 3).shape, (Shape{2, 8}));
  EXPECT_EQ(slice({10, 8}, -1, -4, 100, 1).shape, (Shape{10, 4}));
  EXPECT_FALSE(slice({10, 8}, 0, 5, 5, 1).ok());
  EXPECT_EQ(concat({{2, 3}, {2, 5}}, 1).shape, (Shape{2, 8}));
  EXPECT_FALSE(concat({{2, 3}, {3, 3}}, 1).ok());
}

TEST(ShapeRules, ConvAndPool) {
  EXPECT_EQ(conv2d({64, 1, 28, 28}, {16, 1, 3, 3}, {1, 1}, {1, 1}).shape,
            (Shape{64, 16, 28, 28}));
  EXPECT_EQ(conv2d({1, 3, 32, 32}, {8, 3, 5, 5}, {2, 2}, {0, 0}).shape,
            (Shape{1, 8, 14, 14}));
  EXPECT_EQ(conv2d({1, 3, 8, 8}, {8, 4, 3, 3}, {1, 1}, {0, 0}).error,
            "the input has 3 channels but the weight expects 4");
  EXPECT_EQ(pool2d({64, 16, 28, 28}, {2, 2}, {2, 2}, {0, 0}).shape,
            (Shape{64, 16, 14, 14}));
  EXPECT_FALSE(pool2d({1, 1, 2, 2}, {3, 3}, {1, 1}, {0, 0}).ok());
}

TEST(ShapeRules, EmbeddingLossNorm) {
  EXPECT_EQ(embedding({256, 64}, {16, 32}).shape, (Shape{16, 32, 64}));
  EXPECT_EQ(crossEntropy({16, 32, 256}, {16, 32}).shape, (Shape{}));
  EXPECT_FALSE(crossEntropy({16, 256}, {16, 2}).ok());
  EXPECT_TRUE(lastDimNorm({4, 8}, {8}).ok());
  EXPECT_FALSE(lastDimNorm({4, 8}, {4}).ok());
}

TEST(ShapeRules, ElementCountsDoNotOverflow) {
  EXPECT_FALSE(numElements({int64_t(1) << 40, int64_t(1) << 40}).has_value());
  EXPECT_EQ(numElements({3, 4}), 12);
  EXPECT_FALSE(
      reshape({int64_t(1) << 30}, {int64_t(1) << 40, int64_t(1) << 40}).ok());
}
