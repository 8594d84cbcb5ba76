"""TensorFlow as an autodiff-harness plugin: the frameworks `tensorflow` (eager, a GradientTape
each step) and `tensorflow-function` (the train step one tf.function graph); see README.md."""

__version__ = "0.1.0"
