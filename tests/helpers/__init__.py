"""What several test modules share: tiny models, sample data and runners. A test module imports from here (or
from conftest), never from another test module (tests/test_test_module_imports.py holds that)."""
