"""A local corpus of paper abstracts, imported once and searched offline at scale."""
