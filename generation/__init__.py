"""Retrieval and generation backends behind small interfaces, chosen per study by name."""
