"""Speed benchmarks for the series, run as scripts (``python -m benchmarks``), never as tests.

Four parts, each a module with ``run(cfg) -> list[Table]``: notebook run time and memory
(``bench_notebooks``), slider latency (``bench_sliders``), the attention helpers against
PyTorch's (``bench_attention``) and ``masked_softmax`` against the textbook's
(``bench_masked_softmax``).
"""
