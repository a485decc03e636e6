"""EZAT billing service: prices usage records, stores each once, acknowledges durability."""
