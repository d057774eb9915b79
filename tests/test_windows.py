"""host.windows, the reference of the engine's window generator: its reads, played against an input, are exactly
the golden model's im2col matrix (TFLite's padding and geometry) for random layers of every geometry; and on a
row-stacked input, the im2col matrix with K in (kw, kh, c) order."""

import random

import numpy as np
import pytest

from int8_systolic.golden import staged
from int8_systolic.host.windows import Geometry, blocks, feed_efficiency, stack_input, stacked, steps


def golden_tiles(x, g, filter_hw, stride, dilation, padding, zero_point, rows):
    cols = staged.im2col(x, filter_hw, stride, dilation, padding, pad_value=zero_point)
    a = cols.reshape(-1, cols.shape[-1])                    # [pixels, K]
    m_tiles = -(-a.shape[0] // rows)
    padded = np.full((m_tiles * rows, a.shape[1]), zero_point, np.int8)
    padded[:a.shape[0]] = a
    return padded.reshape(m_tiles, rows, -1).transpose(0, 2, 1)   # [tiles, K, rows]


@pytest.mark.parametrize("seed", range(40))
def test_window_reads_equal_im2col(seed):
    rng = random.Random(seed)
    rows, width = rng.choice([(8, 8), (4, 8), (8, 4), (3, 16)])
    b, h, w, c = rng.choice([1, 1, 2]), rng.randint(1, 9), rng.randint(1, 9), rng.choice([1, 2, 3, 8, 9, 16])
    kh, kw = rng.randint(1, 3), rng.randint(1, 3)
    stride, dilation = (rng.randint(1, 3), rng.randint(1, 3)), (rng.choice([1, 1, 2]), rng.choice([1, 1, 2]))
    padding = rng.choice(["SAME", "VALID"])
    if padding == "VALID" and ((kh - 1) * dilation[0] + 1 > h or (kw - 1) * dilation[1] + 1 > w):
        padding = "SAME"
    zero_point = rng.randint(-128, 127)
    x = np.random.default_rng(seed).integers(-128, 128, (b, h, w, c)).astype(np.int8)
    g = Geometry.of(x.shape, (kh, kw), stride, dilation, padding)
    want = golden_tiles(x, g, (kh, kw), stride, dilation, padding, zero_point, rows)
    for pitch in (None, c + 8):          # the input stored packed, or a bank more a pixel (as the engine's buffer)
        got = steps(g, x, zero_point, rows, width, pitch)
        np.testing.assert_array_equal(got, want, err_msg=f"{g}, pitch {pitch}")


def test_reads_stay_inside_the_input_unless_masked():
    """An unmasked byte is always inside the input tensor: the generator never reads outside its buffer."""
    g = Geometry.of((1, 5, 6, 3), (3, 3), (2, 1), (1, 2), "SAME")
    size = 5 * 6 * 3
    for reads, _ in blocks(g, 8, 8):
        for rd in reads:
            for j in range(8):
                if not rd.pad >> j & 1:
                    assert 0 <= rd.addr + j < size


@pytest.mark.parametrize(("shape", "filter_hw", "expected"), [
    ((1, 32, 32, 16), (3, 3), 48 / 48),      # runs of 48 bytes: whole blocks
    ((1, 32, 32, 3), (3, 3), 27 / (8 * 6)),  # ResNet-8's first layer: runs of 9 bytes, 2 blocks each
    ((1, 25, 5, 64), (1, 1), 1.0),
])
def test_feed_efficiency(shape, filter_hw, expected):
    g = Geometry.of(shape, filter_hw, (1, 1), (1, 1), "SAME")
    assert feed_efficiency(g, 8, 8) == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(20))
def test_row_stacked_reads_equal_im2col(seed):
    """The generator's reads on the stacked geometry, played against the stacked input, are golden's im2col with K
    in (kw, kh, c) order: the order the compiler lays a stacked layer's weights in."""
    rng = random.Random(seed)
    rows, width = rng.choice([(8, 16), (8, 8), (4, 8)])
    b, h, w, c = rng.choice([1, 1, 2]), rng.randint(1, 12), rng.randint(1, 9), rng.choice([1, 1, 2, 3])
    kh, kw = rng.randint(1, 10), rng.randint(1, 4)
    stride, dilation = (rng.choice([1, 2, 3, 5]), rng.randint(1, 2)), (1, rng.choice([1, 1, 2]))
    padding = rng.choice(["SAME", "VALID"])
    if padding == "VALID" and (kh > h or (kw - 1) * dilation[1] + 1 > w):
        padding = "SAME"
    zero_point = rng.randint(-128, 127)
    x = np.random.default_rng(seed).integers(-128, 128, (b, h, w, c)).astype(np.int8)
    g = Geometry.of(x.shape, (kh, kw), stride, dilation, padding)
    want = golden_tiles(x, g, (kh, kw), stride, dilation, padding, zero_point, rows)   # [tiles, K (kh, kw, c), rows]
    tiles = want.shape[0]
    want = want.reshape(tiles, kh, kw, c, rows).transpose(0, 2, 1, 3, 4).reshape(tiles, -1, rows)
    s = stacked(g)
    flat = stack_input(x, g, zero_point).reshape(s.batch, s.in_h, s.in_w, s.in_c)
    np.testing.assert_array_equal(steps(s, flat, zero_point, rows, width), want, err_msg=f"{g}")


def test_stacking_feeds_ds_cnn_first_layer():
    """DS-CNN's first layer (10x4 over 1 channel): runs of 4 bytes, a quarter of a 16-byte read; stacked, one run of
    40 bytes a window, read in 3 blocks for 40 steps (the array at its rate)."""
    g = Geometry.of((1, 49, 10, 1), (10, 4), (2, 2), (1, 1), "SAME")
    assert feed_efficiency(g, 8, 16) == pytest.approx(40 / (8 * 10))
    assert feed_efficiency(stacked(g), 8, 16) == pytest.approx(40 / (8 * 3))
