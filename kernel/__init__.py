"""The shared kernel: what every app may import and which imports none of them.

The domain error and its API handler, text utilities, the JSONL reader and the enqueue helpers.
"""
