"""Batch Bake's process pool: the worker processes, what each runs, and how the main process starts and hears from them."""
