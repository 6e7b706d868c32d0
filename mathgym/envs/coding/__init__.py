"""Code envs: CodeSandbox-v0 and CodeRepair-v0, their task sets and the readers of code data sets' layouts."""
