"""Builds libveloxquant (the repository's CMake project, shared library only) and ships it inside
the package, so that `pip install ./python` gives a self-contained package whose only runtime
dependency is NumPy. VQ_LIBRARY=/path/to/libveloxquant.so skips the build and ships that file
(the Makefile passes the library it just built)."""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def build_library():
    given = os.environ.get("VQ_LIBRARY")
    if given:
        if not os.path.isfile(given):
            raise SystemExit(f"VQ_LIBRARY={given}: no such file")
        return os.path.realpath(given)
    if not os.path.isfile(os.path.join(ROOT, "CMakeLists.txt")):
        raise SystemExit("veloxquant: build from the repository (python/ next to CMakeLists.txt) "
                         "or set VQ_LIBRARY to a built libveloxquant.so")
    bdir = os.path.join(ROOT, "build-python")
    subprocess.check_call(["cmake", "-S", ROOT, "-B", bdir, "-DCMAKE_BUILD_TYPE=Release",
                           "-DVQ_BUILD_TESTS=OFF", "-DVQ_BUILD_BENCH=OFF"])
    subprocess.check_call(["cmake", "--build", bdir, "--target", "veloxquant", "-j",
                           str(os.cpu_count() or 2)])
    return os.path.realpath(os.path.join(bdir, "libveloxquant.so"))


class BuildWithLibrary(build_py):
    def run(self):
        lib = build_library()
        super().run()
        dst = os.path.join(self.build_lib, "veloxquant", "libveloxquant.so")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(lib, dst)


class BinaryDistribution(Distribution):
    """The wheel carries a native library: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
