"""The exports: what each dataset is (``_datasets``) and the parquet files it lives in, written a
batch at a time with a manifest and read back (``_exports``). The build writes them; the readers
and the report read them."""
