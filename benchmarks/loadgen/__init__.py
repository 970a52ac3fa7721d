"""The load generator measured: schedule lag, agreement with vegeta, capacity vs wrk."""
