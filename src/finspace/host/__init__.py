"""The host: GPU readings (NVML), the known GPUs and this machine, thread priority, installed versions.

May import: errors, units (tests/test_imports.py).
"""
