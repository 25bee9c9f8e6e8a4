"""The workload trace pages: upload into an engagement, the characterisation and prediction."""
