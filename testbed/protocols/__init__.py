"""Protocols: how the server drives the devices on the simulated clock. The only package that imports simpy's
processes besides the engine's environment. Every protocol speaks the clock's vocabulary (testbed/clock.py: a
device task's timeline and plan) and asks the run's kit (kit.py) for everything but the clock; the engine
(testbed/engine.py) names them by protocol.kind. Nothing is imported here; what a protocol is handed is built by
testbed/build.py, which no protocol imports."""
