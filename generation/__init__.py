"""Retrieval and generation backends behind small interfaces, chosen per study by name, with the typed
configuration of the services they call and its Django side (generation.settings)."""
