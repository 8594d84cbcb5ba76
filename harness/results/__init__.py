"""Results: what a finished case leaves behind (`records`), where it is kept (`store`,
`merge`), and the estimates and tables made from it (`tables`, `compare`, `machines`,
`baselines`). Imports the contract and the measurement layer, never the runner.
"""
