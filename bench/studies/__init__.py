"""One-off studies behind a design choice, run by hand (`python -m bench.studies.<study>`): the state codec
(`codec_study`, whose shipped codec's figures the report shows), where a big state lives (`spill_study`), the stored
size of a checkpoint (`item_size`, asserted by tests)."""
