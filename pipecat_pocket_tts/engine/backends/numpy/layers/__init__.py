"""The model's layers in NumPy: FlowLM, the sampler, Mimi, SEANet, convolutions, linears."""
