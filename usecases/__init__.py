"""One entry function per use case, shared by the operators and the command line: read Blender data in bulk, make one core call, write the result, report."""
