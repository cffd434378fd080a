"""Figures that judge a retarget: direction, plane and travel errors per bone group, computed from joint positions."""
