"""The runtime layer: cffi declarations and the library loader, sessions, streams, device and host
buffers, tensors, device arrays, errors and dtypes. It knows no operator; everything above imports it."""
