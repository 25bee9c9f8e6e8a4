"""The contract: spec versions proposed and signed, stop-loss resets, the parties'
signing keys, and the accepted inventory with its signed amendments.
"""
