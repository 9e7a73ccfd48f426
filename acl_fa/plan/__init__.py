"""What an op will do on a chip, from the tiling policies of libaclfa_plan (forward, backward,
decode plans) and the host models built on them (pipeline timing, L2, roofline, standard attention)."""
