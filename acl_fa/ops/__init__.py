"""The operators, one module per family, all on one call path (opcall): forward (V1 and V2),
backward (V1 and V2), decode, varlen, LSE merge, device add; and the flash-attn / SDPA faces (compat)."""
