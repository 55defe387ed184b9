"""Tools run by hand: `python -m bench.tools.train_dictionary` rebuilds the zstd dictionary Baton ships."""
