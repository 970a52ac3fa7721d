class Pool:  # placeholder
    pass
