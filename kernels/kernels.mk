# Placeholder: the kernels build rules (nvcc and g++ emulation) live here.
$(LIBDIR)/libdecodebench_cuda.so:
	@echo "kernels: not built yet" >&2; exit 1
$(LIBDIR)/libdecodebench_emu.so:
	@mkdir -p $(LIBDIR)
