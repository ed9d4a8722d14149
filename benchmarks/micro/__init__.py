"""One stage, kernel or text step at a time: Mimi, FlowLM precision, kernels, tokenizer..."""
