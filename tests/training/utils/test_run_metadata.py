import importlib.metadata as md
import platform

import evidential
from training.utils.run_metadata import package_versions


def test_package_versions_of_distributions_import_names_and_specials():
    v = package_versions(
        "torch", "faiss", "python", "evidential-rag", "sentence-transformers", "no-such-pkg-xyz"
    )
    assert list(v) == [
        "torch",
        "faiss",
        "python",
        "evidential-rag",
        "sentence-transformers",
        "no-such-pkg-xyz",
    ]
    assert v["torch"] == md.version("torch")
    assert v["faiss"] == md.version("faiss-cpu")  # import name -> its distribution
    assert v["python"] == platform.python_version()
    assert v["evidential-rag"] == evidential.__version__
    assert v["sentence-transformers"] == md.version("sentence-transformers")
    assert v["no-such-pkg-xyz"] == "not installed"
    assert package_versions() == {}
