-- Who claimed a push to send: a claim stands while that very process
-- lives (a slow server), and a sender that stopped mid-send (Ctrl-C of
-- `push listen`, the tray quit, the laptop shut) leaves a claim the next
-- sender takes at once, not after a minute nobody waits for.
ALTER TABLE pushes ADD COLUMN claimer_pid INTEGER;
ALTER TABLE pushes ADD COLUMN claimer_start INTEGER;
