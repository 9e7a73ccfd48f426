import numpy as np, time, acl_fa
from acl_fa import parallel
from acl_fa.accuracy import check_gradients
rng = np.random.default_rng(1)
for p, causal, n, nkv, S in ((2, False, 2, 2, 40), (4, True, 4, 2, 37), (8, True, 2, 1, 70)):
    q = rng.standard_normal((1, n, S, 32)).astype(np.float16)
    k, v = (rng.standard_normal((1, nkv, S, 32)).astype(np.float16) for _ in range(2))
    dout = rng.standard_normal(q.shape).astype(np.float16)
    out, lse = parallel.ring_attention(q, k, v, devices=list(range(p)), causal=causal)
    t=time.time()
    grads = parallel.ring_attention_backward(dout, q, k, v, out, lse, devices=list(range(p)), causal=causal)
    checks = check_gradients(grads, q, k, v, dout, causal=causal, scale=1/np.sqrt(32), layout="BNSD", num_heads=n, num_kv_heads=nkv, dtype_name="float16")
    print(p, causal, [(c.name, c.ok, c.max_error, c.tolerance) for c in checks], round(time.time()-t,2))
