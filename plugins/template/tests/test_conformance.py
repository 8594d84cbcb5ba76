"""The conformance kit on the template's framework: every model in both dtypes, each a test.
cnn, rnn and lstm are skipped with the reason NumpyMLP.supports gives (n/a, not a failure)."""
from harness.plugin import parametrize_with_checks


@parametrize_with_checks(["numpy-mlp"])
def test_conformance(check):
    check()
