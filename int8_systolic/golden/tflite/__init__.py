"""Bridges between the golden model and real TFLite runtimes (dev extra only).

:mod:`golden.tflite.builder` writes single-op int8 ``.tflite`` models;
:mod:`golden.tflite.runtimes` runs them in TFLite-Micro and LiteRT's reference resolver.
"""
