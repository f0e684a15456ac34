"""Harness specs: how to launch a kernel on its own, fill its inputs and check its outputs.

A spec (`NAME.kxspec.toml`, format in docs/harness-spec.md) is loaded and validated once by
`spec.load_spec`; `KernelSpec.launch` resolves one problem size to concrete launch
dimensions; `inputs.make_inputs` builds deterministic, poisoned argument arrays; and
`reference` runs a NumPy reference and compares outputs. Keeping these pieces free of
any device code lets the verifier, the tuner and the tests share them without a GPU.
"""
