"""Operations benchmark: what the access log (and metrics) cost a served request."""
