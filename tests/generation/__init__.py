"""Tests of the retrieval and generation backends, against local stand-ins."""
