print("offline-sync")
