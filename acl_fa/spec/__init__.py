"""What a call means, shared by the ops, the plans and the CLI: layouts, the attention options
(mask, window, dropout, varlen), the band rule and Philox. Host-only, no device work."""
