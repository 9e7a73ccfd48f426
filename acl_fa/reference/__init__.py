"""float64 references of the ops, written from the documented semantics (they import no op), and
the accuracy rule that compares an op's output with them."""
